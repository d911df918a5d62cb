"""tf.data service: distribute a chain (client), the dispatcher and worker servers (servers), watch
the workers (watch), check a port (ports), and a local cluster with the 1-vs-N worker benchmark (bench).

Light on purpose: `tfpipe serve` checks a port (tfpipe.service.ports) before TensorFlow loads,
so importing this package imports no submodule. `tfpipe.service.client` registers the
distributor with the core when imported (declared as a plug-in by `tfpipe/__init__.py`).
"""
