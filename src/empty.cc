// Anchor for libweft.so, whose objects all come from weft_core.
