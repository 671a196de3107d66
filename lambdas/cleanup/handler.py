"""The stack-deletion cleanup function: the custom resource that removes this cluster's capacity on `cdk destroy`."""
