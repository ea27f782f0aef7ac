"""The engine: the audit as one Prefect flow run whose children are its stages, on work pools (see ops/__init__.py)."""
