"""The training wing: how an FCN is trained, from a VOC folder to a run directory.

One module per concept, each importing only the ones before it and the floors below
(model, data, inference's evaluator; the ground floor's machine facts):

* [`recipes`][]: the ``practical`` and ``paper`` recipes (plain data);
* [`loss`][]: the segmentation loss (mean over labelled pixels, void left out);
* [`rates`][]: the per-layer learning rates (skip layers, score_fr's stable rate);
* [`optimizer`][]: Caffe's SGD and the order of its updates;
* [`config`][]: [`TrainConfig`][], a run's settings, each with its range;
* [`checkpoint`][]: the run directory (atomic checkpoints, state, log, guard);
* [`run_lock`][]: one training process per run directory;
* [`distribute`][]: the strategy, the cluster, the chief, syncing;
* [`agreement`][]: every worker trains with the chief's settings;
* [`batch_size`][]: a step's memory estimate and the batch that fits;
* [`loop`][]: the compiled step and the epoch loop;
* [`phases`][]: the head on frozen VGG blocks first, then every layer;
* [`train`][]: [`fcn.train`][], which puts them together.

The public names are ``fcn.train``, ``fcn.TrainConfig``, ``fcn.TrainResult`` and
``fcn.find_batch_size``; this package re-exports nothing, so ``fcn.training.train`` is the
module and never the function.
"""
