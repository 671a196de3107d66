"""The interruption function: EC2 and AWS Health events, acted on for the nodes they name."""
