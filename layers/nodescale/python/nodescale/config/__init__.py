"""NodePool configuration: Karpenter's three API generations, from any source, to one model (no I/O here:
the sources are read by aws/nodepool_parameters.py and k8s/nodepool_objects.py).

    documents.parse_documents(text, source) -> [(source#i, object)]  YAML/JSON text, DocumentError on bad text
    loader.load(documents) -> ConfigResult                           convert + validate; bad ones become errors
    loader.validate(documents) -> [ConfigError]                      load's pass but references (deploy-time check)

Every configuration object is checked strictly (strict.py, against the field table in schema.py): an
unknown field or a misspelled Karpenter kind is an error naming the path and the likely intended name.

No re-exports here: a module that needs one piece (the bounded YAML reader, the errors) must not load the
loader and every schema with it (#32, cold start).
"""
