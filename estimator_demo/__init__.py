"""estimator_demo: tf.estimator.train_and_evaluate on tfpipe input pipelines, driven by absl flags.

Run it with `python -m estimator_demo --help`. train.py: flags, training, export,
reload and summary; data.py: corpus, held-out split and shards; model.py: the
model_fn; hooks.py: the eval report (input wait: tfpipe.estimator.InputWaitHook).
"""
