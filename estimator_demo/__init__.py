"""estimator_demo: tf.estimator.train_and_evaluate on tfpipe input pipelines, driven by absl flags.

Run it with `python -m estimator_demo --help`; the code is in train.py (flags, data,
training, export), model.py (model_fn) and hooks.py (input-wait measurement).
"""
