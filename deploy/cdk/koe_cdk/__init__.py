"""koe's AWS infrastructure as a CDK v2 app: image assets, the SageMaker endpoint, scaling and IAM."""
