"""Layer 0, files: where things live on disk and how they are written safely — the roots (``paths``), sha256
manifests (``manifest``), atomic folders, locks, checkpoints and weights hashes (``folders``).

Imports nothing of ``mrtpo``; every other layer may import it.
"""
