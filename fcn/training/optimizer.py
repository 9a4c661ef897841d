"""Caffe's SGD as the FCN solvers run it, and the order in which a step updates the variables.

[`CaffeSGD`][]: coupled L2 decay on kernels, twice the rate and no decay on biases, per-layer
rate multipliers (the skip layers' [`fcn.training.rates.skip_kernel_lr_mults`][]) and
measured per-layer factors held in the optimiser's state; momentum applied in place.
[`update_order`][]: each variable updated as soon as the backward pass is done reading it.
[`recipe_optimizer`][]: the optimiser a [`Recipe`][] asks for.
"""

from __future__ import annotations

from collections.abc import Sequence

import keras
import tensorflow as tf

from fcn._compat import UpdateAllHook
from fcn.training.rates import HEAD_SCORE
from fcn.training.recipes import Recipe


@keras.saving.register_keras_serializable(package="fcn")
class CaffeSGD(UpdateAllHook, keras.optimizers.SGD):
    """SGD with Caffe's solver conventions of the FCN ``solver.prototxt`` files.

    Kernels get L2 weight decay coupled into the gradient (``g + decay * w``, as Caffe does; Keras'
    own ``weight_decay`` is decoupled); biases (1-D variables) get ``bias_lr_mult`` times the
    learning rate and no decay. ``kernel_lr_mults`` maps layer names to a factor on their kernel's
    loss gradient (``mult * g + decay * w``): with ``s**2`` it trains that layer exactly as if its
    input were scaled by ``s`` (see [`fcn.training.rates.skip_kernel_lr_mults`][]).
    ``layer_lr_mults`` maps layer names to a factor on the whole step of their variables (the
    rate of kernel and bias, decay included): the VGG body's
    [`Recipe.body_rate`][fcn.training.recipes.Recipe] once it trains. The layers of
    ``measured_layers`` get one more factor on their kernel's loss gradient, held in the optimiser's
    state rather than its config ([`rate_factors`][], 1 until set; saved, restored and synced with
    the other optimiser variables): [`fcn.training.train.train`][] sets score_fr's from its input
    energy at the start of a run ([`fcn.training.rates.stable_rate_factor`][]).

    Examples:
        >>> optimizer = CaffeSGD(learning_rate=1e-4, momentum=0.9,
        ...                      kernel_lr_mults={"score_pool3": 1e-8})
        >>> optimizer.get_config()["kernel_lr_mults"]
        {'score_pool3': 1e-08}
    """

    def __init__(
        self,
        *args,
        caffe_weight_decay: float = 5e-4,
        bias_lr_mult: float = 2.0,
        kernel_lr_mults: dict[str, float] | None = None,
        layer_lr_mults: dict[str, float] | None = None,
        measured_layers: Sequence[str] = (),
        **kw,
    ):
        super().__init__(*args, **kw)
        self.caffe_weight_decay = caffe_weight_decay
        self.bias_lr_mult = bias_lr_mult
        self.kernel_lr_mults = dict(kernel_lr_mults or {})
        self.layer_lr_mults = dict(layer_lr_mults or {})
        self.measured_layers = tuple(measured_layers)
        self.rate_factors: dict[str, keras.Variable] = {}
        """The factor of each of [`measured_layers`][fcn.training.optimizer.CaffeSGD] (a scalar
        variable, after build)."""
        self.update_after: dict[str, tuple[str, ...]] = {}
        """[`update_order`][] of the model: when set, each variable (by path) is updated as soon
        as the gradients named here exist (on one replica; a scheduling hint, not config)."""

    def build(self, variables):
        super().build(variables)
        self._gradient_mults, self._factors, self._rate_mults = [], [], []  # by variable index
        for name in self.measured_layers:
            self.rate_factors[name] = self.add_variable(
                (), initializer="ones", dtype="float32", name=f"{name}_rate_factor"
            )
        for v in variables:
            layer = v.path.split("/")[-2] if "/" in v.path else None
            kernel = self.kernel_lr_mults.get(layer, 1.0) if len(v.shape) > 1 else 1.0
            self._gradient_mults.append(self.bias_lr_mult if len(v.shape) == 1 else kernel)
            self._factors.append(self.rate_factors.get(layer) if len(v.shape) > 1 else None)
            self._rate_mults.append(self.layer_lr_mults.get(layer, 1.0))

    def update_all(self, grads, trainable_variables, learning_rate):
        """The update of every variable (``fcn._compat.UpdateAllHook``), in
        [`update_after`][]'s order: each update waits for the gradients named there and for
        nothing else (Keras' own waits for all of them, so every gradient is held to the end of
        the backward pass; fc6's alone is 392 MiB). Several replicas keep Keras' all-reduce and
        order."""
        replicas = tf.distribute.get_strategy().num_replicas_in_sync
        if not self.update_after or replicas > 1:
            self.keras_update_all(grads, trainable_variables, learning_rate)
            return
        by_path = {variable.path: grad for grad, variable in zip(grads, trainable_variables)}
        for grad, variable in zip(grads, trainable_variables):
            after = self.update_after.get(variable.path, ())
            with tf.control_dependencies([by_path[path] for path in after if path in by_path]):
                self.update_step(grad, variable.value, learning_rate)

    def update_step(self, gradient, variable, learning_rate):
        """One variable's step, in place where momentum is on (no full-size temporaries):
        ``m <- momentum * m - lr * (mult * g + decay * w)``, ``w <- w + m`` (``lr`` times the
        layer's ``layer_lr_mults``), as
        ``m -= (lr * decay / momentum) * w`` then TensorFlow's fused Keras-momentum kernel with
        rate ``lr * mult``; both rewrite the variables' own buffers."""
        index = self._get_variable_index(variable)
        mult = self._gradient_mults[index]
        if self._factors[index] is not None:
            mult = mult * tf.cast(self._factors[index], variable.dtype)
        decay = self.caffe_weight_decay if len(variable.shape) > 1 else 0.0
        learning_rate = learning_rate * self._rate_mults[index]
        if self.momentum == 0 or self.nesterov:  # the plain formula, with its temporaries
            gradient = gradient * keras.ops.cast(mult, gradient.dtype)
            if decay:
                gradient = gradient + keras.ops.cast(decay, gradient.dtype) * keras.ops.cast(
                    variable, gradient.dtype
                )
            super().update_step(gradient, variable, learning_rate)
            return
        rate = tf.cast(learning_rate, variable.dtype)
        accumulator = self.momentums[index]
        if decay:
            tf.raw_ops.ResourceApplyGradientDescent(
                var=accumulator.handle,
                alpha=rate * (decay / self.momentum),
                delta=tf.convert_to_tensor(variable),
            )
        tf.raw_ops.ResourceApplyKerasMomentum(
            var=variable.handle, accum=accumulator.handle, lr=rate * mult,
            grad=tf.cast(gradient, variable.dtype), momentum=tf.cast(self.momentum, variable.dtype),
            use_nesterov=False,
        )  # fmt: skip

    def get_config(self):
        return {
            **super().get_config(),
            "caffe_weight_decay": self.caffe_weight_decay,
            "bias_lr_mult": self.bias_lr_mult,
            "kernel_lr_mults": self.kernel_lr_mults,
            "layer_lr_mults": self.layer_lr_mults,
            "measured_layers": list(self.measured_layers),
        }


def update_order(model: keras.Model) -> dict[str, tuple[str, ...]]:
    """For each trainable variable of ``model`` (by path), the variables whose gradients its
    update must wait for ([`CaffeSGD.update_after`][]): those of the nearest layers upstream
    that have trainable weights (fc6's update waits for conv5_3's gradients, score_pool4's for
    conv4_3's). Those gradients are computed from this layer's input gradient, so by then the
    backward pass has read this layer's kernel for the last time: updated earlier, TensorFlow
    would copy the kernel to keep the value being read (copy on write), and updated later, its
    gradient would be held longer than needed.

    Examples:
        >>> from fcn import build_model
        >>> order = update_order(build_model("fcn8s", weights=None, width=1 / 16))
        >>> order["fc6/kernel"], order["score_pool3/bias"], order["conv1_1/kernel"]
        (('conv5_3/kernel', 'conv5_3/bias'), ('conv3_3/kernel', 'conv3_3/bias'), ())
    """
    layers = {layer["name"]: layer for layer in model.get_config()["layers"]}

    def producers(node) -> list[str]:  # the layer names a serialised inbound node reads
        if isinstance(node, dict):
            config = node.get("config")
            history = config.get("keras_history") if isinstance(config, dict) else None
            if history:
                return [history[0]]
            return [name for value in node.values() for name in producers(value)]
        if isinstance(node, (list, tuple)):
            return [name for value in node for name in producers(value)]
        return []

    def upstream(name: str, seen: set[str]) -> list[str]:
        found = []
        for parent in producers(layers[name]["inbound_nodes"]):
            if parent not in seen:
                seen.add(parent)
                weights = model.get_layer(parent).trainable_weights
                found += [parent] if weights else upstream(parent, seen)
        return found

    order = {}
    for layer in model.layers:
        after = tuple(
            v.path for name in upstream(layer.name, set())
            for v in model.get_layer(name).trainable_weights
        )  # fmt: skip
        order.update({variable.path: after for variable in layer.trainable_weights})
    return order


def recipe_optimizer(
    recipe: Recipe,
    total_batches: int,
    accumulate: int = 1,
    kernel_lr_mults: dict[str, float] | None = None,
    body: Sequence[str] = (),
) -> CaffeSGD:
    """The optimiser ``recipe`` asks for, for a run of ``total_batches`` batches, averaging
    ``accumulate`` batches per update, with ``kernel_lr_mults``
    ([`fcn.training.rates.skip_kernel_lr_mults`][] of the model), the ``body`` layers (those
    frozen in the head phase) at ``recipe.body_rate`` and score_fr's measured factor
    ([`fcn.training.rates.HEAD_SCORE`][]). (Keras evaluates a schedule at every batch,
    accumulated or not, so the poly schedule spans batches, not updates.)

    Examples:
        >>> from fcn.training.recipes import RECIPES
        >>> optimizer = recipe_optimizer(RECIPES["practical"], total_batches=1000)
        >>> optimizer.momentum, round(float(optimizer.learning_rate), 6)  # poly schedule, step 0
        (0.9, 0.001)
    """
    lr = recipe.learning_rate
    if recipe.poly_power is not None:
        lr = keras.optimizers.schedules.PolynomialDecay(
            lr, max(total_batches, 1), end_learning_rate=0.0, power=recipe.poly_power
        )
    return CaffeSGD(
        learning_rate=lr,
        momentum=recipe.momentum,
        gradient_accumulation_steps=accumulate if accumulate > 1 else None,
        kernel_lr_mults=kernel_lr_mults,
        layer_lr_mults={name: recipe.body_rate for name in body if recipe.body_rate != 1},
        measured_layers=(HEAD_SCORE,),
    )
