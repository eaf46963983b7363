// placeholder: replaced by the reference component's first real source file
