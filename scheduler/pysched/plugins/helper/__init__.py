"""Code shared by the in-tree plugins (upstream's ``plugins/helper``): vectorised node
selection, taint checks, score normalisation, volume events, resource specs."""
