"""One module per swept hold reason. Each registers its rules (``registry.rule``) and is
imported by :mod:`flowledger.scheduled.sweep`, which lists this package: a module added here
is a rule of every sweep, with no list to extend."""
