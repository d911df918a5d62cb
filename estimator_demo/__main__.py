"""usage: python -m estimator_demo [--data DIR|CSV|SHARDS] [--eval_data ...] [--model_dir DIR]
           [--train_steps N] [--pipeline naive|optimized] [--[no]TOGGLE ...] [--FEATURE ...]

Trains a small CNN with tf.estimator.train_and_evaluate on tfpipe input pipelines,
prints examples/s and the share of step time spent waiting for input, exports a
SavedModel that takes what the data's domain serves (raw waveforms, encoded JPEG/PNG
bytes, a plug-in's arrays, ...), reloads it and predicts a few held-out files. The
domain is found from --data's files; with no --data it trains on the synthetic corpus
of --domain (any registered domain with one).
"""

from absl import flags

from estimator_demo import train
from tfpipe import flags as tfpipe_flags

if __name__ == "__main__":
    train.define_flags()
    # --help lists the key flags of the main module: the demo's and tfpipe's pipeline/feature flags.
    flags.adopt_module_key_flags(train)
    flags.adopt_module_key_flags(tfpipe_flags)
    train.run()
