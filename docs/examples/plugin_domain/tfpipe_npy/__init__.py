"""tfpipe-npy: .npy arrays in class folders as a tfpipe domain (registered by tfpipe_npy.domain)."""
