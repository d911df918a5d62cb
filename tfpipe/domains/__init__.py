"""Built-in domains: plug-ins on the domain-free core (tfpipe.core). Each registers itself on import."""
