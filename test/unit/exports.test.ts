import { expect, it } from 'vitest';
import * as api from '../../src/index.js';

it('exports exactly the documented public names', () => {
  expect(Object.keys(api).sort()).toMatchSnapshot();
});
