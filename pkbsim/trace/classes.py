"""How a dispatched operator is classed: what the host pays for it and what kernel it runs.

Host classes (each has its own host cost, ``pkbsim.trace.program.HOST_CLASSES``):

- ``view``: no kernel (views, reshapes, allocations, metadata);
- ``kernel``: one or more device kernels from PyTorch's own code;
- ``library``: a cuBLAS, cuDNN, cuFFT or cuSOLVER call (GEMMs, convolutions, FFTs, attention,
  linear algebra), whose host path is longer;
- ``collective``: a torch.distributed call (c10d's bookkeeping and NCCL's launch);
- ``sync``: a device-to-host synchronisation (``.item()``, ``.tolist()``, ``.cpu()``, an
  operator whose output shape depends on the data).

Kernel kinds (each has its own device efficiency, ``pkbsim.trace.program.KERNEL_KINDS``):
``elementwise``, ``reduction``, ``gemm``, ``conv``, ``fft``, ``attention``, ``sort``,
``scan``, ``index``, ``copy``, ``fill``, ``linalg``.

Only names, no torch: the recorder looks operators up here by their ``aten.name`` packet.
"""

from __future__ import annotations

HOST_CLASSES = ("view", "kernel", "library", "collective", "sync")

NO_KERNEL = frozenset({
    "aten.empty", "aten.empty_like", "aten.empty_strided", "aten.new_empty",
    "aten.new_empty_strided", "aten.lift_fresh", "aten.detach", "aten.alias",
    "aten._to_copy_noop", "aten.set_", "aten.resize_", "aten.is_same_size", "aten.sym_size",
    "aten.sym_stride", "aten.sym_numel", "aten.sym_storage_offset",
    "aten._has_compatible_shallow_copy_type",
    "aten.is_nonzero_noop", "aten.record_stream", "aten.result_type", "aten._unsafe_view",
    "aten.as_strided",
    "aten._reshape_alias", "aten.expand", "aten.view", "aten.reshape", "aten.unsqueeze",
})

GEMM = frozenset({"aten.mm", "aten.addmm", "aten.bmm", "aten.baddbmm", "aten.addbmm",
                  "aten._scaled_mm", "aten.addmv", "aten.mv", "aten.dot", "aten.vdot",
                  "aten.ger", "aten.outer", "aten._int_mm", "aten.linear"})
CONV = frozenset({"aten.convolution", "aten._convolution", "aten.cudnn_convolution",
                  "aten.convolution_backward", "aten._slow_conv2d_forward",
                  "aten.slow_conv3d_forward", "aten.convolution_overrideable",
                  "aten.mkldnn_convolution", "aten._slow_conv2d_backward",
                  "aten.slow_conv_dilated2d", "aten.slow_conv_dilated3d",
                  "aten._conv_depthwise2d", "aten.conv_depthwise3d"})
FFT = frozenset({"aten._fft_r2c", "aten._fft_c2r", "aten._fft_c2c"})
ATTENTION = frozenset({
    "aten._scaled_dot_product_flash_attention", "aten._scaled_dot_product_efficient_attention",
    "aten._scaled_dot_product_cudnn_attention",
    "aten._scaled_dot_product_flash_attention_for_cpu",
    "aten._scaled_dot_product_flash_attention_backward",
    "aten._scaled_dot_product_efficient_attention_backward",
    "aten._scaled_dot_product_flash_attention_for_cpu_backward",
    "aten._flash_attention_forward", "aten._flash_attention_backward",
    "aten._efficient_attention_forward", "aten._efficient_attention_backward"})
LINALG = frozenset({"aten.linalg_cholesky_ex", "aten.linalg_inv_ex", "aten.linalg_solve_ex",
                    "aten.linalg_qr", "aten.linalg_svd", "aten._linalg_svd", "aten.linalg_eigh",
                    "aten._linalg_eigh", "aten.linalg_lu_factor_ex", "aten.linalg_lu_solve",
                    "aten.triangular_solve", "aten.linalg_solve_triangular", "aten.cholesky",
                    "aten.cholesky_solve", "aten._linalg_solve_ex", "aten.linalg_eig",
                    "aten.linalg_householder_product", "aten.geqrf", "aten._linalg_det",
                    "aten._linalg_slogdet", "aten.linalg_matrix_exp", "aten.cholesky_inverse"})
SORT = frozenset({"aten.sort", "aten.argsort", "aten.topk", "aten.kthvalue", "aten.median",
                  "aten.nanmedian", "aten.unique_dim", "aten._unique", "aten._unique2",
                  "aten.unique_consecutive", "aten.msort", "aten.mode", "aten.searchsorted",
                  "aten.bucketize"})
SCAN = frozenset({"aten.cumsum", "aten.cumprod", "aten.cummax", "aten.cummin",
                  "aten.logcumsumexp", "aten._cummax_helper", "aten._cummin_helper"})
INDEX = frozenset({"aten.index", "aten.index_put", "aten.index_put_", "aten._index_put_impl_",
                   "aten.index_select", "aten.index_add", "aten.index_add_", "aten.index_copy",
                   "aten.index_copy_", "aten.gather", "aten.scatter", "aten.scatter_",
                   "aten.scatter_add", "aten.scatter_add_", "aten.scatter_reduce",
                   "aten.scatter_reduce_", "aten.embedding", "aten.embedding_dense_backward",
                   "aten.masked_select", "aten.masked_scatter", "aten.masked_scatter_",
                   "aten.nonzero", "aten.take", "aten.put_", "aten.index_fill",
                   "aten.index_fill_", "aten.repeat_interleave", "aten.bincount",
                   "aten.histc", "aten.index_reduce", "aten.index_reduce_",
                   "aten.grid_sampler_2d", "aten.grid_sampler_3d", "aten.argwhere"})
COPY = frozenset({"aten.copy_", "aten._to_copy", "aten.clone", "aten.contiguous", "aten.cat",
                  "aten.stack", "aten.flip", "aten.roll", "aten.repeat", "aten.constant_pad_nd",
                  "aten.reflection_pad1d", "aten.reflection_pad2d", "aten.replication_pad1d",
                  "aten.replication_pad2d", "aten.tril", "aten.triu", "aten.narrow_copy",
                  "aten.split_with_sizes_copy", "aten.unfold_copy", "aten._unsafe_view_copy",
                  "aten.col2im", "aten.im2col", "aten.pixel_shuffle", "aten.upsample_nearest2d",
                  "aten.upsample_bilinear2d", "aten.upsample_nearest3d", "aten.diag_embed",
                  "aten.where"})
FILL = frozenset({"aten.fill_", "aten.zero_", "aten.zeros", "aten.ones", "aten.full",
                  "aten.zeros_like", "aten.ones_like", "aten.full_like", "aten.arange",
                  "aten.linspace", "aten.eye", "aten.scalar_tensor", "aten.randn",
                  "aten.rand", "aten.randint", "aten.randperm", "aten.normal_", "aten.uniform_",
                  "aten.bernoulli_", "aten.random_", "aten.multinomial", "aten.exponential_",
                  "aten.new_zeros", "aten.new_ones", "aten.new_full", "aten.logspace",
                  "aten.empty_permuted_fill", "aten.tensor"})
REDUCTION = frozenset({"aten.sum", "aten.mean", "aten.amax", "aten.amin", "aten.max",
                       "aten.min", "aten.argmax", "aten.argmin", "aten.prod", "aten.norm",
                       "aten.linalg_vector_norm", "aten.std", "aten.var", "aten.var_mean",
                       "aten.std_mean", "aten.all", "aten.any", "aten.logsumexp",
                       "aten._softmax", "aten._log_softmax", "aten._softmax_backward_data",
                       "aten._log_softmax_backward_data", "aten.native_layer_norm",
                       "aten.native_layer_norm_backward", "aten._fused_rms_norm",
                       "aten._fused_rms_norm_backward", "aten.native_group_norm",
                       "aten.native_batch_norm", "aten._native_batch_norm_legit",
                       "aten._native_batch_norm_legit_functional",
                       "aten.native_group_norm_backward", "aten.nll_loss_forward",
                       "aten.nll_loss_backward", "aten.nll_loss2d_forward", "aten.count_nonzero",
                       "aten.aminmax", "aten.nansum", "aten.cross_entropy_loss",
                       "aten.mse_loss", "aten.dist", "aten.cdist", "aten._cdist_forward",
                       "aten.equal", "aten.allclose", "aten.isin", "aten.trace",
                       "aten.logdet", "aten.kl_div", "aten.binary_cross_entropy",
                       "aten.binary_cross_entropy_with_logits", "aten.linalg_matrix_norm"})
LIBRARY_KINDS = frozenset({"gemm", "conv", "fft", "attention", "linalg"})

# operators that launch more than one kernel on a GPU (PyTorch's CUDA implementations:
# segmented radix sort, top-k's two passes, bucketised unique); a guess of the common path
EXTRA_KERNELS = {"aten.sort": 2, "aten.argsort": 2, "aten.topk": 1, "aten._unique2": 3,
                 "aten.unique_dim": 4, "aten.unique_consecutive": 2, "aten.nonzero": 1,
                 "aten.masked_select": 2, "aten.index_put_": 1, "aten._index_put_impl_": 1,
                 "aten.repeat_interleave": 1, "aten.bincount": 1, "aten.median": 1,
                 "aten.kthvalue": 1, "aten.linalg_vector_norm": 0, "aten.var_mean": 0,
                 "aten.std": 0, "aten.var": 0, "aten.native_layer_norm_backward": 1,
                 "aten.nll_loss_forward": 0, "aten._fft_c2r": 1, "aten.linalg_cholesky_ex": 2,
                 "aten.linalg_inv_ex": 3, "aten.linalg_solve_ex": 3, "aten.linalg_qr": 4,
                 "aten._linalg_svd": 6, "aten._linalg_eigh": 6, "aten.cumsum": 0}


def kind_of(name: str, pointwise: bool) -> str:
    """The kernel kind of an operator that launches one (``name`` as ``aten.mm``)."""
    for kind, names in (("gemm", GEMM), ("conv", CONV), ("fft", FFT), ("attention", ATTENTION),
                        ("linalg", LINALG), ("sort", SORT), ("scan", SCAN), ("index", INDEX),
                        ("copy", COPY), ("fill", FILL), ("reduction", REDUCTION)):
        if name in names:
            return kind
    return "elementwise" if pointwise else "other"


def host_class(kind: str) -> str:
    return "library" if kind in LIBRARY_KINDS else "kernel"


def kernels_of(name: str) -> int:
    """Device kernels one call of a launching operator issues."""
    return 1 + EXTRA_KERNELS.get(name, 0)
