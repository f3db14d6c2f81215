"""The operations, one transport-free entry point each: `AnswerService.answer` / `.chat`,
`SearchService.search`, `IndexService.registry` / `.add` / `.remove`, `give_feedback`.

Each does the steps every caller shares once (the `top_k` bound, the output cap, the filter
language, the tenant's limit and token charging, idempotency, the cache status); the HTTP routes
(`service.api`) and the in-process eval backend (`evals.backends`) only adapt them: decode, call,
encode. The model is vLLM's `api_router` → `OpenAIServingChat`.
"""
