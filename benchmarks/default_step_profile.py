"""Where the default recipe's training step spends its time, part by part, in one process.

The step ``fcn.train`` runs by default (the practical recipe: 2 crops of 320x320, VGG blocks
1-5 frozen, fc6, fc7 and the score layers trained, from the real VGG16 file) is timed whole
(``fcn.training.loop.train_step``) and in parts: the forward pass (training and inference
mode), the gradients of every trained variable, the same with fc6 and/or fc7 left out, and
the optimizer's update alone. The differences say what each part costs: fc6's gradient is
``grads_all_trained - grads_without_fc6``. fc6 alone, on these crops' pool5: its forward in
bands of ``ROW_PRODUCT_COLUMNS`` output channels and in one band (whole kernel rows, as before
Dec 7), and its kernel gradient. Run it once per kernel set:

    TF_ENABLE_ONEDNN_OPTS=0 python benchmarks/default_step_profile.py --json eigen.json
    TF_ENABLE_ONEDNN_OPTS=1 python benchmarks/default_step_profile.py --json onednn.json

Each part: one call to trace, then the median of ``--repeats`` calls (s).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from unittest import mock

import keras
import numpy as np
import tensorflow as tf

import fcn
from fcn import conv_gradients
from fcn.device import cpu_summary
from fcn.training.config import TrainConfig
from fcn.training.loop import train_step, trained_tape
from fcn.training.loss import segmentation_loss
from fcn.training.train import compile_for_training

VGG16_NOTOP = (
    Path(__file__).resolve().parents[2]
    / "shared/vgg16_imagenet_notop/vgg16_weights_tf_dim_ordering_tf_kernels_notop.h5"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vgg16", default=str(VGG16_NOTOP), help="a Keras VGG16 weights file")
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--json", help="write the parts' times here")
    args = parser.parse_args()
    print(f"# {cpu_summary()}", flush=True)
    recipe = TrainConfig().effective_recipe()
    model = fcn.build_model("fcn8s", weights=args.vgg16)
    compile_for_training(model, recipe, total_batches=1000, pretrained=True)
    rng = np.random.default_rng(0)
    shape = (recipe.batch_size, recipe.crop_size, recipe.crop_size)
    images = tf.constant(rng.integers(0, 256, (*shape, 3), dtype=np.uint8))
    labels = tf.constant(rng.integers(0, 21, shape, dtype=np.uint8))
    summed = segmentation_loss(reduction="sum")
    trained = model.trainable_variables

    def gradients(variables):
        @tf.function
        def run():
            with trained_tape(variables) as tape:
                loss = summed(labels, model(images, training=True))
            return [tf.reduce_sum(g) for g in tape.gradient(loss, variables)]

        return run

    def without(*layers):
        return gradients([v for v in trained if v.path.split("/")[0] not in layers])

    pool5 = keras.Model(model.input, model.get_layer("pool5").output)(images)
    fc6 = tf.convert_to_tensor(model.get_layer("fc6").kernel)

    def fc6_forward(columns):
        with mock.patch.object(conv_gradients, "ROW_PRODUCT_COLUMNS", columns):  # when traced
            run = tf.function(lambda: conv_gradients.conv2d(pool5, fc6, "VALID"))
            run()
        return run

    @tf.function
    def fc6_kernel_gradient():
        with tf.GradientTape() as tape:
            tape.watch(fc6)
            total = tf.reduce_sum(conv_gradients.lean_conv2d(pool5, fc6, "valid"))
        return tf.reduce_sum(tape.gradient(total, fc6))

    data = iter(tf.data.Dataset.from_tensors((images, labels)).repeat())
    step = train_step(model, tf.distribute.get_strategy())
    zeros = [tf.zeros_like(v) for v in trained]
    parts = {
        "train_step": lambda: step(data),
        "forward_training": tf.function(lambda: summed(labels, model(images, training=True))),
        "forward_inference": tf.function(lambda: tf.reduce_sum(model(images, training=False))),
        "grads_all_trained": gradients(trained),
        "grads_without_fc6": without("fc6"),
        "grads_without_fc7": without("fc7"),
        "grads_without_fc6_fc7": without("fc6", "fc7"),
        "optimizer_apply": tf.function(lambda: model.optimizer.apply(zeros, trained)),
        "fc6_forward_in_bands": fc6_forward(conv_gradients.ROW_PRODUCT_COLUMNS),
        "fc6_forward_whole_rows": fc6_forward(fc6.shape[-1]),
        "fc6_kernel_gradient": fc6_kernel_gradient,
    }
    times = {}
    for name, part in parts.items():
        part()
        runs = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            tf.nest.map_structure(lambda t: t.numpy() if hasattr(t, "numpy") else t, part())
            runs.append(time.perf_counter() - start)
        times[name] = statistics.median(runs)
        print(f"{name:24s} {times[name]:.3f} s", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(times, indent=1))


if __name__ == "__main__":
    main()
