"""The AWS side of the local environment: moto's server, seeding, fault injection."""
