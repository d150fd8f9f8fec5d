"""``ragdesk encode``: passage vectors computed by an actor pool on a Ray cluster.

The job reads a passage source on the driver's node, encodes shards of it in a Ray Data
actor pool (each actor runs ragdesk's own passage encoder) and writes embedding shards
that ``index import --embeddings DIR`` takes (``NAME.npy`` + ``NAME.ids.npy``, ids =
passage positions from 0). Shards are written whole (temporary name, then a rename), so a
killed job resumes with the shards it finished.

Ray is optional (``pip install "ragdesk[distributed]"``): only :mod:`.ray_job` imports it,
and only inside its functions, so this package imports without it.
"""
