/**
 * SigV4 for API Gateway's IAM authorisation (service `execute-api`), with the AWS SDK for
 * JavaScript v3's own signer (@smithy/signature-v4) and its default credential chain
 * (@aws-sdk/credential-provider-node: environment, shared profiles, SSO, web identity, ECS,
 * instance metadata; cached and refreshed before expiry). The region is the configured one,
 * else the one in an `{api}.execute-api.{region}.amazonaws.com` host, else `AWS_REGION`.
 */
import { Sha256 } from "@aws-crypto/sha256-js";
import { defaultProvider } from "@aws-sdk/credential-provider-node";
import { SignatureV4 } from "@smithy/signature-v4";
import { SigningError } from "./errors.js";

/** The service name API Gateway's IAM authorisation verifies. */
export const SERVICE = "execute-api";

/** AWS credentials. */
export interface Credentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
  expiration?: Date;
}

/** How to sign: the region and the credentials (each found by the standard chain when absent). */
export interface SigV4Options {
  region?: string;
  credentials?: Credentials | (() => Promise<Credentials>);
}

/** The region of an API Gateway host; none for another (a custom domain, a local stack). */
export function regionFromHost(host: string): string | undefined {
  const labels = (host.split(":")[0] ?? "").toLowerCase().split(".");
  const [api, service, region, ...rest] = labels;
  const aws = rest.join(".") === "amazonaws.com" || rest.join(".") === "amazonaws.com.cn";
  return api && service === "execute-api" && region && aws ? region : undefined;
}

/** A request to sign: what `fetch` will send. */
export interface Signable {
  method: string;
  url: URL;
  headers: Record<string, string>;
  body: string;
}

/** Signs requests to one API. */
export class Signer {
  private readonly signer: SignatureV4;

  constructor(options: SigV4Options, host: string, service = SERVICE) {
    const region = options.region ?? regionFromHost(host) ?? process.env.AWS_REGION ?? process.env.AWS_DEFAULT_REGION;
    if (!region) {
      throw new SigningError(
        `no region for ${host}: configure one, or set AWS_REGION (the host is not {api}.execute-api.{region}.amazonaws.com)`,
      );
    }
    this.signer = new SignatureV4({
      service,
      region,
      sha256: Sha256,
      applyChecksum: false, // no x-amz-content-sha256: API Gateway signs the body's hash itself
      credentials: options.credentials ?? defaultProvider(),
    });
  }

  /** The headers to send: the request's and `authorization`, `x-amz-date` (and a session token). */
  async sign(request: Signable, at?: Date): Promise<Record<string, string>> {
    const query: Record<string, string> = {};
    request.url.searchParams.forEach((v, k) => (query[k] = v));
    try {
      const signed = await this.signer.sign(
        {
          method: request.method,
          protocol: request.url.protocol,
          hostname: request.url.hostname,
          port: request.url.port ? Number(request.url.port) : undefined,
          path: request.url.pathname,
          query,
          headers: { ...request.headers, host: request.url.host },
          body: request.body,
        },
        at ? { signingDate: at } : {},
      );
      return signed.headers;
    } catch (e) {
      throw new SigningError(e instanceof Error ? e.message : String(e), e);
    }
  }
}
