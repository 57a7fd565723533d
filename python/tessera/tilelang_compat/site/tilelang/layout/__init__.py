"""``tilelang.layout``: shared-memory layouts. CPU buffers are row-major and T.annotate_layout is
ignored, so the layout builders return None."""


def make_swizzled_layout(buffer, *args, **kwargs):
    return None


make_full_bank_swizzled_layout = make_half_bank_swizzled_layout = make_quarter_bank_swizzled_layout = make_swizzled_layout
make_linear_layout = make_wgmma_swizzled_layout = make_tcgen05mma_swizzled_layout = make_swizzled_layout
