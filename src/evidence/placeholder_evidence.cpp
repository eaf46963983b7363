// placeholder: replaced by the evidence component's first real source file
