"""The training loss: softmax cross-entropy over the labelled pixels.

The per-layer learning rates that keep SGD on it stable from ImageNet weights are in
`fcn.training.rates`.
"""

from __future__ import annotations

import keras

from fcn.classes import IGNORE_LABEL


def segmentation_loss(reduction: str = "sum_over_batch_size") -> keras.losses.Loss:
    """Softmax cross-entropy from logits on sparse labels, void (255) excluded.

    The loss is averaged over the labelled pixels of the batch (Keras' ``ignore_class`` masks
    void pixels and renormalises by the number of valid ones); ``reduction="sum"`` sums them
    instead ([`fcn.training.loop`][] divides by the labelled pixels of all replicas). The paper
    sums the per-pixel loss
    instead ("unnormalized"); the two differ by the factor of labelled pixels per batch, which the
    ``paper`` recipe folds into its learning rate (1e-10 x ~187,500 pixels).

    Examples:
        >>> import numpy as np
        >>> labels, logits = np.array([[0, 255]]), np.zeros((1, 2, 3))  # 3 classes, one void
        >>> round(float(segmentation_loss()(labels, logits)), 2)  # ln 3, the labelled pixel's
        1.1
    """
    return keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, ignore_class=IGNORE_LABEL, reduction=reduction, name="cross_entropy"
    )
