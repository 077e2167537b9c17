from tasks import resize

resize.delay("a.png", width=64)                        # a handle: .status(), .result(), .revoke()
resize.apply_async(["a.png"], {"width": 64}, countdown=60, job_id="a-png")
