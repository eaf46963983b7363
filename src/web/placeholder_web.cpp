// placeholder: replaced by the web component's first real source file
