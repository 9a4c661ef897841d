"""The training wing: how an FCN is trained, from a VOC folder to a run directory.

One module per concept, each importing only the ones before it and the floors below
(model, data, inference's evaluator; the ground floor's machine facts):

* :mod:`~fcn.training.optimizer`: Caffe's SGD and the order of its updates;
* :mod:`~fcn.training.recipes`: the loss, the ``practical`` and ``paper`` recipes, skip-layer
  and head rates;
* :mod:`~fcn.training.config`: :class:`~fcn.training.config.TrainConfig`, a run's settings;
* :mod:`~fcn.training.checkpoint`: the run directory (atomic checkpoints, state, log, guard);
* :mod:`~fcn.training.distribute`: the strategy, the cluster, the chief, syncing;
* :mod:`~fcn.training.batch_size`: a step's memory estimate and the batch that fits;
* :mod:`~fcn.training.loop`: the compiled step and the epoch loop;
* :mod:`~fcn.training.train`: :func:`fcn.train`, which puts them together.

The public names are ``fcn.train``, ``fcn.TrainConfig``, ``fcn.TrainResult`` and
``fcn.find_batch_size``; this package re-exports nothing, so ``fcn.training.train`` is the
module and never the function.
"""
