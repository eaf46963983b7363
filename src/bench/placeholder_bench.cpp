// placeholder: replaced by the bench component's first real source file
