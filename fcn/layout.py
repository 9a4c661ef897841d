"""The FCN's layout as facts (ground floor): VGG16's blocks and the paper's layer names, the
four variants, the 100-pixel input pad and the crop offsets of the reference prototxts.

Plain values, no TensorFlow: [`fcn.TrainConfig`][] and the ``fcn`` command line offer the
variants without importing it; [`fcn.model`][] builds the layers these names describe and
[`fcn.vgg16`][] copies VGG16's weights into them.

Examples:
    >>> VARIANTS[-2], CROP_OFFSETS["fcn8s"]["score"], conv_name(4, 2)
    ('fcn8s', 31, 'conv4_2')
"""

from __future__ import annotations

VGG_BLOCKS: tuple[tuple[int, int], ...] = ((2, 64), (2, 128), (3, 256), (3, 512), (3, 512))
"""(number of 3x3 convs, filters) of the five VGG16 blocks."""


FC_LAYERS: tuple[str, str] = ("fc6", "fc7")
"""The paper's names of VGG16's fully connected ``fc1`` and ``fc2``, turned into convolutions."""


def conv_name(block: int, index: int) -> str:
    """The paper's name of the ``index``-th 3x3 conv of VGG block ``block`` (1-based).

    Examples:
        >>> conv_name(4, 2)
        'conv4_2'
    """
    return f"conv{block}_{index}"


def pool_name(block: int) -> str:
    """The paper's name of the max pool that ends VGG block ``block``.

    Examples:
        >>> pool_name(4)
        'pool4'
    """
    return f"pool{block}"


def body_layer_names() -> tuple[str, ...]:
    """The VGG body of every FCN in order, conv1_1 .. pool5 (18 layers).

    Examples:
        >>> body_layer_names()[:3], len(body_layer_names())
        (('conv1_1', 'conv1_2', 'pool1'), 18)
    """
    names: list[str] = []
    for block, (convs, _) in enumerate(VGG_BLOCKS, 1):
        names += [conv_name(block, i) for i in range(1, convs + 1)] + [pool_name(block)]
    return tuple(names)


VARIANTS: tuple[str, ...] = ("fcn32s", "fcn16s", "fcn8s", "fcn8s_atonce")
"""The paper's networks: predictions refined down to 32, 16 or 8 pixels (staged), and FCN-8s
trained all at once."""


def check_variant(variant: str) -> None:
    """Refuse a ``variant`` that is not one of [`VARIANTS`][].

    Raises:
        ValueError: naming ``variant`` and the choices.

    Examples:
        >>> check_variant("fcn8s")
        >>> check_variant("fcn4s")
        Traceback (most recent call last):
        ValueError: unknown variant 'fcn4s'; choose one of fcn32s, fcn16s, fcn8s, fcn8s_atonce
    """
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; choose one of {', '.join(VARIANTS)}")


INPUT_PAD = 100
"""Zero padding (in mean-subtracted space, i.e. the mean colour) in front of conv1_1."""

CROP_OFFSETS: dict[str, dict[str, int]] = {
    "fcn32s": {"score": 19},
    "fcn16s": {"score_pool4c": 5, "score": 27},
    "fcn8s": {"score_pool4c": 5, "score_pool3c": 9, "score": 31},
    "fcn8s_atonce": {"score_pool4c": 5, "score_pool3c": 9, "score": 31},
}
"""Top-left offset (pixels) of every crop layer, per variant, as in the reference prototxts."""
