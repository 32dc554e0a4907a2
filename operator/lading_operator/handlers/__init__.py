"""kopf handlers, one module per kind; importing a module registers its handlers."""
