"""AWS adapters: EC2 catalog and prices, launch templates, AMIs, user data, Fleet, tags, offerings cache."""
