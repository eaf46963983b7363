// placeholder: replaced by the store component's first real source file
