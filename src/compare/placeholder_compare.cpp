// placeholder: replaced by the compare component's first real source file
