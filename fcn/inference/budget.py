"""Every memory budget of inference, and the decisions they make: whole, streamed, tiled, batched.

One forward pass ([`fcn.inference.streamed`][]) runs a batch of equal-size images either
**whole** (the Keras model on the batch: fast to trace, ~0.55 KiB per padded input pixel for
the full FCN-8s) or **streamed** (in bands of rows: a few bands of every layer). Above
[`Budget.max_pixels`][fcn.inference.budget.Budget] an image runs in overlapping **tiles**
([`fcn.inference.tiling`][]), and images of the same size are **batched** up to
[`Budget.batch_pixels`][fcn.inference.budget.Budget] ([`fcn.evaluate`][]). The constants below are
the only place these sizes are written (a training step's gradient bands have their own,
[`fcn.conv_gradients.IM2COL_BAND_BYTES`][]); the functions are the only place they are
compared.
"""

from __future__ import annotations

from dataclasses import dataclass

BAND_BYTES = 4 * 2**20
"""Size of one band of the widest activation of a streamed pass (conv1's output; the upsampled
logits), bytes. Bands of every layer exist at once, so peak memory grows with it; smaller bands
only mean more, shorter kernel calls (never fewer than 2 input rows)."""

MIN_ROWS = 8
"""Most output rows a streamed conv waits for before it runs (fewer where that many rows would
exceed [`BAND_BYTES`][]; a layer's last rows never wait): the deep, low-resolution layers
then run on several rows at a time instead of one."""

WHOLE_PIXELS = 160_000
"""Padded input pixels (batch x (H + 200) x (W + 200) for the FCNs' 100 px pad) up to which a
pass runs whole rather than streamed: ~90 MB of activations for the full FCN-8s, and a graph
that traces in a fraction of a second where the streamed one takes seconds (once per process)."""

STREAMED_MAX_PIXELS = 25_000_000
"""Default pixels of one forward pass of a model that streams: a 6000x4000 photo whole (a
4000x3000 one measured ~0.4 GiB above the resting footprint, see benchmarks/README.md)."""

WHOLE_MAX_PIXELS = 2_000_000
"""Default pixels of one forward pass of a model that runs whole: ten VOC images. The full
FCN-8s run whole needs ~0.55 KiB per pixel of the input padded by 100 px per side, ~2 GiB here."""

BATCH_PIXELS = WHOLE_MAX_PIXELS
"""Default input pixels per batch of equal-size images: as many as a model that cannot stream
runs at once, ten VOC images. Batching saves little on a CPU; the cap keeps a batch's memory
(and the images waiting for batch mates) small."""

BUFFER_CHUNKS = 4
"""Images waiting for a batch mate of the same size hold at most this many batches of pixels."""

CONFUSION_PIXELS = 2**20
"""Pixels per confusion-matrix update: its int32 temporaries stay near 20 MB for any image."""


@dataclass(frozen=True)
class Budget:
    """The pixel budgets of one inference call (evaluate, predict).

    Attributes:
        max_pixels: most input pixels (rows x columns) of one image per forward pass; a larger
            image runs in tiles.
        batch_pixels: most input pixels (batch x rows x columns) of a batch of equal-size
            images.

    Examples:
        >>> Budget.default(streams=True)
        Budget(max_pixels=25000000, batch_pixels=2000000)
        >>> Budget.default(streams=True, max_pixels=500_000).tiles(1000, 1000)
        True
    """

    max_pixels: int
    batch_pixels: int

    @classmethod
    def default(cls, streams: bool, max_pixels: int | None = None) -> Budget:
        """The budget for a model that ``streams`` (see [`fcn.inference.streamed.streams`][]):
        an explicit ``max_pixels`` bounds batches and single images alike; by default images
        run whole up to [`STREAMED_MAX_PIXELS`][] ([`WHOLE_MAX_PIXELS`][] for a model that
        cannot stream) and batches up to [`BATCH_PIXELS`][]."""
        if max_pixels is not None:
            if max_pixels < 1:
                raise ValueError(f"max_pixels must be a positive pixel count, got {max_pixels}")
            return cls(max_pixels, max_pixels)
        return cls(STREAMED_MAX_PIXELS if streams else WHOLE_MAX_PIXELS, BATCH_PIXELS)

    def tiles(self, height: int, width: int) -> bool:
        """Whether a (height, width) image runs in tiles under this budget."""
        return not fits_one_pass(height, width, self.max_pixels)


def fits_one_pass(height: int, width: int, max_pixels: int) -> bool:
    """Whether a (height, width) image runs in one forward pass of at most ``max_pixels``
    input pixels (else: in tiles).

    Examples:
        >>> fits_one_pass(375, 500, WHOLE_MAX_PIXELS), fits_one_pass(4000, 6000, WHOLE_MAX_PIXELS)
        (True, False)
    """
    return height * width <= max_pixels


def runs_whole(batch: int, height: int, width: int, pad: int) -> bool:
    """Whether a streamable pass of ``batch`` images of (height, width) pixels, padded by
    ``pad`` per side, is small enough ([`WHOLE_PIXELS`][]) to run whole.

    Examples:
        >>> runs_whole(1, 100, 100, pad=100), runs_whole(1, 375, 500, pad=100)
        (True, False)
    """
    return batch * (height + 2 * pad) * (width + 2 * pad) <= WHOLE_PIXELS
