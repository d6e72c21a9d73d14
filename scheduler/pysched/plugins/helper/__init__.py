"""Code shared by the in-tree plugins (upstream's ``plugins/helper``): vectorised node
selection, taint checks, score normalisation, volume events, resource specs, topology-domain sums.
Only what two or more plugins use is here; a plugin's private helpers live in its own package."""
