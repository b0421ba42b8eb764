"""What the tools' command lines share: numeric flags declared by their defaults."""


def add_numbers(ap, **defaults):
    """--NAME (NAME's underscores as dashes) on argparse parser ap for each NAME=default, of the
    default's type (int or float)."""
    for name, default in defaults.items():
        ap.add_argument("--" + name.replace("_", "-"), type=type(default), default=default)
