"""tfpipe: input pipelines that keep TensorFlow training busy."""

from setuptools import find_packages, setup

setup(
    name="tfpipe",
    version="0.1.0",
    description="Fast, measured tf.data input pipelines for any files and functions, Estimator and Keras.",
    long_description=open("README.md").read() if __import__("os").path.exists("README.md") else "",
    long_description_content_type="text/markdown",
    python_requires=">=3.9,<3.12",  # TensorFlow 2.15, the last release with tf.estimator
    packages=find_packages(include=["tfpipe", "tfpipe.*", "estimator_demo", "estimator_demo.*"]),
    install_requires=[
        "tensorflow==2.15.*",
        "tensorflow-estimator==2.15.*",
        "numpy<2",  # TensorFlow 2.15 is built against NumPy 1.x
        "librosa>=0.10,<0.12",
        "soundfile>=0.12",
        "absl-py>=1.0",
        "tqdm>=4.60",
        "matplotlib>=3.5",
        "pillow>=10,<13",  # image domain (apache-beam 2.77 needs <13)
        "apache-beam>=2.70,<2.80",  # tfpipe prepare --runner=beam (DirectRunner here, any runner on a cluster)
        "google-crc32c>=1.5",  # TFRecord CRCs without TensorFlow in Beam workers
        "protobuf>=4.25,<5",  # TensorFlow 2.15 needs protobuf<5; apache-beam accepts it
        "proto-plus>=1.22,<1.27",  # newer proto-plus requires protobuf 6, which breaks TensorFlow 2.15
    ],
    extras_require={
        # tensorflow-datasets 4.9.4 is the release of TF 2.15's time; tensorflow-metadata 1.16+ needs protobuf 5.
        "tfds": ["tensorflow-datasets==4.9.4", "tensorflow-metadata>=1.14,<1.16"],
        # s3:// paths: tensorflow-io 0.36 is the release built for TensorFlow 2.15 (gs:// needs nothing).
        "s3": ["tensorflow-io==0.36.*"],
        "test": ["pytest>=7", "pytest-timeout>=2", "pytest-xdist>=3", "tensorflow-datasets==4.9.4", "tensorflow-metadata>=1.14,<1.16",
                 "tensorflow-io==0.36.*", "moto[server]>=5.0,<6"],  # tests/objstore: a real S3 server on 127.0.0.1
        "photos": ["scikit-image>=0.21,<0.25", "scikit-learn>=1.3,<1.6"],  # docs/examples/photo_corpus.py
    },
    entry_points={"console_scripts": ["tfpipe=tfpipe.cli:main"]},
)
