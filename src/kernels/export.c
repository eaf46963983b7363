/* libkindex.so is the kindex_kernels archive linked whole; this file only gives the target a source. */
#include "kindex/kindex.h"
