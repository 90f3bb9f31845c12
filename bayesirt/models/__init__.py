"""Model specs and their PyMC builders."""
