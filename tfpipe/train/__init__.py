"""Training integrations: Estimator (estimator: make_input_fn, serving, train_distribute),
Keras (keras: split_datasets, InputWaitCallback), and "is training waiting on input?"
(wait: the TensorFlow-free figures and verdict; wait_hook: the Estimator's InputWaitHook).

Light on purpose: importing this package loads no submodule (and no TensorFlow).
The public paths stay `tfpipe.estimator` and `tfpipe.keras` (served by tfpipe.compat).
"""
