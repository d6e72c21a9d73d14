"""The real-node tier: a RealCluster (pysched_dev.realcluster) on this machine; needs root."""
