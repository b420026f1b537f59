"""The voice agent: LLM sources and the pipeline that speaks their answers as they stream."""
