// Stand-in for LocalStack's ddb-local-loader agent, which LocalStack passes to DynamoDB Local
// with -javaagent and would otherwise download from GitHub. The original patches DynamoDB
// Local to allow more than 20 GSIs per table; this one does nothing, so that limit stays.
// Built by infra/localstack/ctl install (javac + a manifest with Premain-Class).
public final class DdbLocalLoader {
    private DdbLocalLoader() {}

    public static void premain(String args, java.lang.instrument.Instrumentation inst) {}
}
