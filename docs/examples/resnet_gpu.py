"""Is a GPU training ResNet50 waiting on tfpipe? Keras ResNet50 (weights=None, mixed precision) on the
GPU, fed by tfpipe from prepared photo shards, against the same model fed by one batch already on the
GPU (its ceiling: what the model reaches when input is free).

    python docs/examples/photo_corpus.py /tmp/photos 2000                       # the photos
    tfpipe prepare --input /tmp/photos --output /tmp/photo_shards --store jpeg --max_side 256
    python docs/examples/resnet_gpu.py /tmp/photo_shards [STEPS=200] [BATCH=128]

Prints, for each arm: images/s over the timed steps (after warm-up) and, for tfpipe, the share of
step time the model waited for input (tfpipe.keras.InputWaitCallback). The ratio tfpipe/ceiling is
the answer: >= 0.95 means the GPU is not kept waiting.
"""

import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

import tfpipe  # noqa: E402


class _Clock(tf.keras.callbacks.Callback):
    """Wall time of the steps after `skip` warm-up steps."""

    def __init__(self, skip):
        super().__init__()
        self.skip, self.start, self.steps = skip, None, 0

    def on_train_batch_end(self, batch, logs=None):
        self.steps += 1
        if self.steps == self.skip:
            self.start = time.perf_counter()

    def rate(self, batch_size):
        return (self.steps - self.skip) * batch_size / (time.perf_counter() - self.start)


def model(classes):
    tf.keras.mixed_precision.set_global_policy("mixed_float16")
    inputs = tf.keras.Input((224, 224, 3), dtype=tf.uint8)  # bytes cross to the GPU; scaled there
    x = tf.keras.layers.Rescaling(1 / 127.5, offset=-1)(tf.cast(inputs, tf.float16))
    net = tf.keras.applications.ResNet50(weights=None, input_tensor=x, classes=classes)
    m = tf.keras.Model(inputs, tf.keras.layers.Activation("linear", dtype="float32")(net.output))
    m.compile(tf.keras.optimizers.SGD(0.1, momentum=0.9),
              tf.keras.losses.SparseCategoricalCrossentropy(from_logits=False))
    return m


def main(shards, steps=200, batch=128):
    config = tfpipe.ImageConfig(height=224, width=224, dtype="uint8")
    pipe = tfpipe.PipelineConfig.optimized(batch_size=batch, seed=0)
    classes = len(tfpipe.find(shards).class_names)
    results = {"gpus": [d.name for d in tf.config.list_logical_devices("GPU")], "cores": os.cpu_count(),
               "steps": steps, "batch": batch}
    warm = min(50, steps // 4)
    # Ceiling: one batch made once, held on the GPU, repeated.
    with tf.device("/gpu:0"):
        images = tf.random.uniform([batch, 224, 224, 3], 0, 255, tf.int32)
        on_gpu = (tf.cast(images, tf.uint8), tf.zeros([batch], tf.int64))
    ceiling_ds = tf.data.Dataset.from_tensors(on_gpu).repeat()
    for arm, ds in (("ceiling (batch on the GPU)", ceiling_ds),
                    ("tfpipe (photo shards)", tfpipe.build_dataset(shards, "train", pipe, config, feature_key="image"))):
        m = model(classes)
        clock = _Clock(warm)
        callbacks = [clock]
        wait = tfpipe.keras.InputWaitCallback() if arm.startswith("tfpipe") else None
        if wait:
            callbacks.append(wait)
        m.fit(ds, steps_per_epoch=steps, epochs=1, verbose=0, callbacks=callbacks)
        results[arm] = {"images_per_s": round(clock.rate(batch), 1)}
        if wait:
            results[arm]["input_wait_share"] = round(wait.stats.input_wait_share, 4)
        print(arm, results[arm], flush=True)
    ratio = results["tfpipe (photo shards)"]["images_per_s"] / results["ceiling (batch on the GPU)"]["images_per_s"]
    results["tfpipe / ceiling"] = round(ratio, 3)
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main(sys.argv[1], *(int(a) for a in sys.argv[2:]))
