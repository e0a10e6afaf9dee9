"""The metadata line of an mm log from an H100/H200-class GPU, as the collector writes it: shared by the
tests that build logs by hand."""

MM_LOG_METADATA = {
    "shared_memory": 232448,
    "device_capa": (9, 0),
    "name": "mm",
    "numerical_features": ["m", "k", "n", "mat1_stride_0", "mat1_stride_1", "mat2_stride_0", "mat2_stride_1"],
    "categorical_features": ["mat1_dtype", "mat2_dtype", "mat1_iscontig", "mat2_iscontig", "using_tf32"],
}
