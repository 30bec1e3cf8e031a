"""The composition root: the one package that may import every other (web, workers, store,
grader, nkisim). It puts the `grader` command together (service/cli.py) and runs the whole
service on one machine (service/serve.py); nothing imports it (tests/test_layers.py)."""
