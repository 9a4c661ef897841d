"""The training wing: how an FCN is trained, from a VOC folder to a run directory.

One module per concept, each importing only the ones before it and the floors below
(model, data, inference's evaluator; the ground floor's machine facts):

* [`optimizer`][]: Caffe's SGD and the order of its updates;
* [`recipes`][]: the loss, the ``practical`` and ``paper`` recipes, skip-layer
  and head rates;
* [`config`][]: [`TrainConfig`][], a run's settings;
* [`checkpoint`][]: the run directory (atomic checkpoints, state, log, guard);
* [`distribute`][]: the strategy, the cluster, the chief, syncing;
* [`batch_size`][]: a step's memory estimate and the batch that fits;
* [`loop`][]: the compiled step and the epoch loop;
* [`train`][]: [`fcn.train`][], which puts them together.

The public names are ``fcn.train``, ``fcn.TrainConfig``, ``fcn.TrainResult`` and
``fcn.find_batch_size``; this package re-exports nothing, so ``fcn.training.train`` is the
module and never the function.
"""
