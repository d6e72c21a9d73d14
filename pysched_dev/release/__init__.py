"""``make release``: every artifact of a release, built here from the commit, with one version.

``python -m pysched_dev.release`` (``build``) writes into ``dist/release/``: the sdists of pysched
and pysched-policy, pysched's Linux amd64 and arm64 wheels carrying the ``pysched-cel`` helper
(``wheels``), pysched-policy's pure wheel, the image as an OCI archive with its digest, SBOM and
scan (``hack/image.sh``, tagged as the chart and the manifests deploy it), the chart package,
release notes from the CHANGELOG's section (``notes``), and SHA256SUMS over all of them. It
refuses to start when the files disagree on the version (``versions``). The Python artifacts are
reproducible: built from a copy of the tracked files with pinned build tools (``buildenv``) and
SOURCE_DATE_EPOCH from the commit, then normalised (file order, times, owners, modes).
"""
