"""The domain-free core: map stages, sources, and the one chain every source goes through.

Nothing here knows about audio, images or shard formats: domains (tfpipe.domains.*) and
storage formats (tfpipe.storage) plug in through the registry, `tfpipe.core.registry`.
"""
