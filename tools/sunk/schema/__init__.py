"""Schemas generated from the typed models: values.schema.json (draft-07) and CRD schemas."""
